"""Evaluation at scale, over RoboDojo's result files (`pyrua_dojo.harness.result_files`, which the twin writes) and
our agent records: `pyrua-dojo eval` (`plan`: what to run; `episode_run`: one episode; `pool`: worker processes;
`runner`: the run; `eval_command`: the command line), `play` (one episode) and the options it shares with eval
(`run_options`), calibration on the twin (`twin_calibration`), `summarize`, `compare`, `merge`, `report` and the
episode viewer."""
