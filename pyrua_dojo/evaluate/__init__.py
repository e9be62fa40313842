"""Evaluation at scale: `eval` (runner), `summarize`, `compare`, `merge`, `report` and the episode viewer, over
RoboDojo's result files (`results`, which the twin's harness writes) and our agent records."""
