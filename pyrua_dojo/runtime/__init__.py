"""The agent runtime: everything that runs one episode of our agent on a RoboDojo machine (no MuJoCo).

The episode and its stepping of the environment, the agent loop, the cells the LLM writes and the sandbox they run
in, the prompt (texts, API reference, task card), the trace, image attachments, the judging cards and the calibration
routine. It imports `primitives`, `calibration`, the task catalogue, `llm`, `kernel` and `programs`; never the
plugin, the twin or evaluation.
"""
