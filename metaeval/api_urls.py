from django.urls import path

from . import api, leaderboard_views, planning_views, ppi_items

urlpatterns = [
    path("plan", planning_views.Plan.as_view(), name="api-plan"),
    path("leaderboard", leaderboard_views.Leaderboard.as_view(), name="api-leaderboard"),
    path("studies/<slug:slug>/report", api.StudyReport.as_view(), name="api-study-report"),
    path("studies/<slug:slug>/report/labels", api.StudyLabels.as_view(), name="api-study-labels"),
    path("studies/<slug:slug>/report/ppi-items", ppi_items.StudyPpiItems.as_view(), name="api-study-report-ppi-items"),
]
