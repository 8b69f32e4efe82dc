"""API routes of verifiers and runs; config/urls.py includes them under api/."""

from django.urls import path

from . import api

urlpatterns = [
    path("studies/<slug:slug>/verifiers/", api.VerifierList.as_view(), name="api-verifier-list"),
    path("studies/<slug:slug>/verifiers/<int:verifier_id>", api.VerifierDetail.as_view(), name="api-verifier-detail"),
    path("studies/<slug:slug>/verifiers/<int:verifier_id>/runs", api.VerifierRuns.as_view(), name="api-verifier-runs"),
    path("studies/<slug:slug>/runs/<int:run_id>", api.RunDetail.as_view(), name="api-run-detail"),
    path("studies/<slug:slug>/runs/<int:run_id>/stop", api.RunStop.as_view(), name="api-run-stop"),
    path("studies/<slug:slug>/predictions/import", api.PredictionImport.as_view(), name="api-prediction-import"),
]
