"""Evaluation at scale, over RoboDojo's result files (`result_files`, which the twin's harness writes) and our agent
records: `pyrua-dojo eval` (`plan`: what to run; `episode_run`: one episode; `pool`: worker processes; `runner`: the
run; `eval_command`: the command line), `summarize`, `compare`, `merge`, `report` and the episode viewer."""

