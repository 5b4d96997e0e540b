"""Web viewer for saved runs: metric curves, eval reports and turn-by-turn trajectory replay.

`horizonrl view RUN_DIR` (see `horizonrl.viewer.app`); it reads what trainers, `horizonrl eval`
and `horizonrl solve` wrote and never needs a live environment or a model.
"""
