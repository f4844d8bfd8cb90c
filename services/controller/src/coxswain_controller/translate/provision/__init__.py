"""Provisioning: what should exist for each Gateway (spec 001, 002), as plain manifests.

`desired.desired_objects` is the stage; `shared` and `dedicated` render each mode's objects,
`parameters` reads and layers CoxswainGatewayParameters, `strategic` merges podTemplate patches,
`names` names and labels everything. Nothing is imported here: the Gateway stage imports
`infrastructure`, which must not pull in the renderers that import the Gateway stage.
"""
