from django.urls import path

from . import api

urlpatterns = [
    path("studies/<slug:slug>/report", api.StudyReport.as_view(), name="api-study-report"),
]
