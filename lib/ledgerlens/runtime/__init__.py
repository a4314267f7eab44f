"""What every command runs on: Spark, the console, the output directory, preflight checks."""
