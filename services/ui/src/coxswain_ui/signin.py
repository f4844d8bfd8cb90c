"""/login and /logout, for a UI started without a token of its own.

Each user then reads the controller's API with their own Kubernetes token: the form takes it,
the controller is asked once whether it accepts it (a 403 is accepted: a token with narrower
rights may still read some areas), and it is kept in a cookie that scripts cannot read
(`HttpOnly`), that no other site's request carries (`SameSite=Strict`), and that is `Secure`
when the UI is reached over https. The controller reviews and authorises it on every request;
the UI keeps nothing else.
"""

from __future__ import annotations

import urllib.parse

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from coxswain_ui.client import ApiError
from coxswain_ui.rendering import TOKEN_COOKIE, Pages

__all__ = ["add_routes"]

EXPIRED = "The controller no longer accepts your token; sign in again."


def add_routes(routes: APIRouter, pages: Pages) -> None:
    async def login_form(request: Request) -> Response:
        if pages.client.has_own_token:
            return RedirectResponse("/", status_code=303)
        message = EXPIRED if request.query_params.get("expired") else ""
        return pages.render(request, "login.html", "Sign in", "", live=False, message=message)

    async def login(request: Request) -> Response:
        if pages.client.has_own_token:
            return RedirectResponse("/", status_code=303)
        form = urllib.parse.parse_qs((await request.body()).decode(errors="replace"))
        token = (form.get("token") or [""])[0].strip()
        try:
            await pages.client.get("/fleet", token=token)
        except ApiError as err:
            if err.status != 403:
                message = f"The controller refused that token: {err.status} {err.message}"
                return pages.render(
                    request, "login.html", "Sign in", "", status=401, live=False, message=message
                )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    async def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(TOKEN_COOKIE, path="/")
        return response

    routes.add_api_route("/login", login_form, methods=["GET"])
    routes.add_api_route("/login", login, methods=["POST"])
    routes.add_api_route("/logout", logout, methods=["POST"])
