"""`python -m kvright.sim serve MODEL <vllm serve flags> [--gpu ... --efficiency ... --time-scale ...]`."""

from kvright.sim.server import main

raise SystemExit(main())
