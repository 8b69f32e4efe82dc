from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("accounts/tokens/", views.api_tokens, name="api_tokens"),
    path("accounts/tokens/<int:token_id>/revoke/", views.revoke, name="revoke_token"),
    path("accounts/set-password/<uidb64>/<token>/", views.SetPasswordView.as_view(), name="set_password"),
]
