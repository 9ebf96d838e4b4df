"""The world's rooms (state/): the shared-root readers at its door, then one room per room of state/."""
