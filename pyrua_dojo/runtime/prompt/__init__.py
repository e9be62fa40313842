"""The prompt of an episode: the API reference generated from `Robo` (reference.py), the task card (card.py), their
assembly with the texts of `prompts/` (assemble.py), and `pyrua-dojo prompt` (command.py)."""
