"""The XPolicyLab plugin: the policy's configuration (`config`: deploy.yml merged with XPolicyLab's overrides) and
its model presets (`presets`), beside the XPolicyLab Model that serves our agent."""
