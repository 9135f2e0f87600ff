"""The `cuda-agent` command: one module per subcommand, wired together in `main`."""
