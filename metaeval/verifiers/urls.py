"""Routes of the verifiers page; config/urls.py includes them at the site root."""

from django.urls import path

from . import views

app_name = "verifiers"

urlpatterns = [
    path("studies/<slug:slug>/verifiers/", views.verifiers_page, name="list"),
    path("studies/<slug:slug>/verifiers/baselines/", views.add_baselines, name="add_baselines"),
    path("studies/<slug:slug>/verifiers/pairwise-judge/", views.add_pairwise_judge, name="add_pairwise_judge"),
    path("studies/<slug:slug>/verifiers/import/", views.import_predictions_upload, name="import_predictions"),
    path("studies/<slug:slug>/verifiers/<int:verifier_id>/run/", views.start_verifier_run, name="start_run"),
    path("studies/<slug:slug>/runs/<int:run_id>/stop/", views.stop_verifier_run, name="stop_run"),
    path("studies/<slug:slug>/runs/<int:run_id>/status.json", views.run_status_json, name="run_status"),
]
