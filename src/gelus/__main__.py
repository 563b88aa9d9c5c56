from gelus.cli import main

raise SystemExit(main())
