"""Speculative decoding: proposers, verification in one packed forward, exact acceptance (chapter 50)."""
