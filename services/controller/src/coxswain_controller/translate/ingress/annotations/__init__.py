"""ingress-nginx's annotations: `catalog` (every key and its fate), `values` (how values are
read), `policy` (an Ingress's annotations over its class's defaults, judged and read) and
`groups` (the honoured keys, group by group)."""
