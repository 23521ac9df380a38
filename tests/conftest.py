"""Every test session validates catalogs afresh: the validation memo lives in a throwaway directory."""
import os
import tempfile

os.environ["FITPROBE_CACHE_DIR"] = tempfile.mkdtemp(prefix="fitprobe-test-cache-")
