"""The agent runtime: one episode of the agent (its thread, `robo`, cells and kernels, LLM planners, prompt, trace)
and the stepping that hands its action chunks to the station."""
