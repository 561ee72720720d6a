"""The page: render.py turns a run (build/report/run.json) and the prose templates here into
docs/comparison.md and docs/health.md. It reads figures and outcomes; it measures nothing."""
