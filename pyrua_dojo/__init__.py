"""pyrua-dojo: an LLM agent that acts by writing Python against `robo`, for the RoboDojo dual ARX X5 station.

The packages, bottom to top (`.importlinter` holds the contract): `catalog` (RoboDojo's task facts); the agent
runtime (`runtime`, with the episode, `kernel`, `llm`, `programs`); the XPolicyLab plugin (`plugin`, the Model, `wire`);
the twin's simulation beside them (`twin`, which imports none of them); the RoboDojo side of a twin run (`harness`,
`seg_service`); evaluation (`evaluate`, `relay`); the command line (`cli`) and `benchmarks`.
"""

__version__ = "0.1.0"
