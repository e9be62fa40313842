"""The XPolicyLab plugin: the `Model` that XPolicyLab's policy server loads (`model`: one episode per env index),
the policy's configuration (`config`: deploy.yml merged with XPolicyLab's overrides) and its model presets
(`presets`)."""
