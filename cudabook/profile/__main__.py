"""python -m cudabook.profile: see cli.main."""
from .cli import main

raise SystemExit(main())
