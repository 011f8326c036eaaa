"""Helpers for bench/peers (stdlib only)."""
