"""The code shelf: git sources read through safe git, working copies, snapshots on the shared root and
argus's private cache. Imports specs/ and the shared helpers of state/."""
