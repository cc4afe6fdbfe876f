from goondan.cli import main

raise SystemExit(main())
