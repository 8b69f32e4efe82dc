from django.urls import path

from . import api

urlpatterns = [
    path("auth/token/", api.ObtainToken.as_view(), name="api-token"),
    path("auth/tokens/", api.TokenList.as_view(), name="api-token-list"),
    path("auth/tokens/<int:token_id>", api.TokenRevoke.as_view(), name="api-token-revoke"),
]
