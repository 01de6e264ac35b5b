"""A language model from a GGUF file, on any backend: the file's reader (gguf.py), the llama-family model (model.py),
the tokenizer and the command line (cli.py), and an OpenAI-compatible server (serve.py). A layer on top of the core:
it uses only its public Tensor API."""
