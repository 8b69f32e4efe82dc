"""The project's URLconf plus the verifier routes, for as long as config/urls.py does not include them itself."""

from django.urls import include, path

from config.urls import urlpatterns as project_patterns


def _included(module: str) -> bool:
    for entry in project_patterns:
        name = getattr(entry, "urlconf_name", None)
        if getattr(name, "__name__", name) == module:
            return True
    return False


urlpatterns = list(project_patterns)
if not _included("metaeval.verifiers.api_urls"):
    urlpatterns.insert(0, path("api/", include("metaeval.verifiers.api_urls")))
if not _included("metaeval.verifiers.urls"):
    urlpatterns.append(path("", include("metaeval.verifiers.urls")))
