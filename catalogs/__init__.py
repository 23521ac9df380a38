"""Catalog data and the resolvers that turn a name into specs."""
