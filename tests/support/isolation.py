"""What conftest's autouse fixture takes out of, and puts into, every test's environment."""

from __future__ import annotations

from state.audit import log as audit

UNSET = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "ARGUS_PLAN_KEY", "ARGUS_AUDIT_KEY", "ARGUS_ROOT_KEY",
         *audit.CI_ACTOR_VARIABLES)
"""Would reach another cluster, seal plans, the audit log or the shared root's entries with a real key, or
name a CI actor in audit entries. Tests that need ARGUS_ROOT_KEY set it themselves; Ray nodes never get it
(state.ray.local.node_env)."""
GIT_KEPT = ("GIT_SSL_CAINFO", "GIT_SSL_CAPATH")
"""Every other GIT_* variable could point git at another repository, config or object store."""
GITCONFIG = "[user]\n\tname = argus-tests\n\temail = tests@localhost\n"
"""The test home's only git config: commits in test repositories work without the real one."""
