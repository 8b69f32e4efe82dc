"""URL wiring only: each app owns its routes."""

from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("accounts.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI sets inline styles from its (local) JavaScript; allow that on this page only.
    path(
        "api/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path("api/", include("annotation.api_urls")),
    path("api/", include("metaeval.api_urls")),
    path("api/", include("metaeval.verifiers.api_urls")),
    path("", include("accounts.urls")),
    path("", include("annotation.urls")),
    path("", include("metaeval.urls")),
    path("", include("metaeval.verifiers.urls")),
]

# Unmatched /api/ paths and API server errors answer JSON (annotation/lib/api_errors.py); pages stay HTML.
handler404 = "annotation.lib.api_errors.not_found"
handler500 = "annotation.lib.api_errors.server_error"
