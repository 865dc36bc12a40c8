"""Start-up models: what happens between a gang's placement and its first step (image pulls,
rendezvous, GPU activity). Pure; backends import them as they import the rest of the model."""
