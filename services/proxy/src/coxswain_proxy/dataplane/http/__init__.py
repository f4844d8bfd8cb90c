"""The client side of the request path: HTTP/1.1 connections and what each request becomes."""
