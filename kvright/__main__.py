"""``python -m kvright``: the same as the ``kvright`` command."""

from kvright.cli import main

raise SystemExit(main())
