"""The JSON Schema of autoprof's records (``records.schema.json``) and its generator (:mod:`autoprof.schema.generate`)."""
