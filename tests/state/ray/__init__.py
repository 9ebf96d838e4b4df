"""The Ray adapter: argus's REST client, deadlines, token auth and `argus local`."""
