"""python -m recbench.lab: see recbench.lab.cli."""

from recbench.lab.cli import main

raise SystemExit(main())
