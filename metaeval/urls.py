from django.urls import path, re_path

from . import leaderboard_views, planning_views, ppi_items, views

app_name = "metaeval"

urlpatterns = [
    path("plan/", planning_views.plan_page, name="plan"),
    path("leaderboard/", leaderboard_views.leaderboard_page, name="leaderboard"),
    path("studies/<slug:slug>/precision/", planning_views.precision_card, name="precision_card"),
    path("studies/<slug:slug>/report/", views.report_page, name="report"),
    path("studies/<slug:slug>/report/status/", views.report_status, name="report_status"),
    re_path(
        r"^studies/(?P<slug>[-\w]+)/report\.(?P<fmt>json|csv|html|tex)$", views.report_download, name="report_download"
    ),
    re_path(
        r"^studies/(?P<slug>[-\w]+)/report/tables/(?P<table>[a-z_]+)\.tex$",
        views.report_table_tex,
        name="report_table_tex",
    ),
    path("studies/<slug:slug>/report/ppi-items.csv", ppi_items.ppi_items_download, name="report_ppi_items"),
    re_path(
        r"^studies/(?P<slug>[-\w]+)/report/charts/(?P<chart>[a-z]+)\.(?P<ext>svg|pdf)$",
        views.report_chart,
        name="report_chart",
    ),
]
