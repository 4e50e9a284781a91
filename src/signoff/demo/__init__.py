"""The offline demo: a scripted model, its tools, and the walkthrough."""
