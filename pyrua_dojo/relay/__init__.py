"""The relay: an OpenAI-compatible chat completions endpoint whose replies come from outside (an agent, a person).

`server` is the endpoint and its state directory, `commands` the `pyrua-dojo relay ...` commands and the console
planner (the outside side), `planners` the relay and console planners of `play` / `eval` (the episode's side).
"""
