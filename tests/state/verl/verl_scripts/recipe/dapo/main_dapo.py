"""A recipe entry module shaped like verl-recipe's dapo/main_dapo.py, for argus's tests: argus reads its
@hydra.main with `ast` to find the recipe's config and never imports or runs it."""

import hydra


@hydra.main(config_path="config", config_name="dapo_trainer", version_base=None)
def main(config):
    raise SystemExit("argus's test recipe: not a trainer")
