from autoprof.cli import main

raise SystemExit(main())
