"""The RoboDojo side of a twin run: what RoboDojo's eval scripts do around its simulator, done around the twin.

The eval client (`eval_client`: layouts, the policy's `deploy.py` against `taskenv`, results as RoboDojo writes them
in `result_files`, `videos`), policy directories and their server (`policydir`, `policy_server`, `twin_eval`,
`reference_loop`), the agent record beside each result (`agent_record`), the twin segmentation service that follows
the env (`scene_oracle`) and the `pyrua-dojo twin client` / `twin eval` commands. The simulation itself is
`pyrua_dojo.twin`, which imports nothing from here.
"""
