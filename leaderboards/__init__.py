"""verigym.leaderboards -- suites, the evaluation runner, the results store and standings."""
