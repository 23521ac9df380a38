"""fitprobe: will this LLM run on this hardware, how well, and with which launch flags?"""
__version__ = "0.1.0"
