"""Every test session validates catalogs afresh: the validation memo lives in a throwaway directory.

No test may reach a public address: huggingface_hub fixes its endpoint when first imported and fetches
`{endpoint}/api/agent-harnesses` on its own, so the session's default endpoint is a closed loopback port
(the Hub tests point HF_ENDPOINT at their own loopback Hub)."""
import os
import tempfile

os.environ["LC_ALL"] = "C.UTF-8"  # English text unless a test chooses a language (tests/cli/test_i18n.py)
os.environ["FITPROBE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fitprobe-test-cache-")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="fitprobe-test-hf-")
