"""The XPolicyLab plugin: the `Model` that XPolicyLab's policy server loads, one episode per env index."""
