"""`python -m kvright_dev.sim serve MODEL <vllm serve flags> [--gpu ... --efficiency ... --time-scale ...]`
"""

from kvright_dev.sim.server import main

raise SystemExit(main())
