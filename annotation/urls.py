from django.urls import path, re_path

from annotation.adjudication import views as adjudication_views
from annotation.crowd import ahead_views as participant_ahead_views
from annotation.crowd import manage_views as crowd_views
from annotation.crowd import prolific_views
from annotation.crowd import views as participant_views
from annotation.members import views as member_views
from annotation.progress import views as progress_views
from annotation.studies import views as study_views
from annotation.transfer import views as transfer_views
from annotation.workbench import questionnaire_views, training_views
from annotation.workbench import views as workbench_views

app_name = "annotation"

urlpatterns = [
    path("", study_views.my_studies, name="my_studies"),
    path("studies/new/", study_views.study_new, name="study_new"),
    path("studies/preview-markdown/", study_views.markdown_preview, name="markdown_preview"),
    path("studies/preview-questions/", study_views.questions_preview, name="questions_preview"),
    path("studies/<slug:slug>/", study_views.study_detail, name="study_detail"),
    path("studies/<slug:slug>/settings/", study_views.study_settings, name="study_settings"),
    path("studies/<slug:slug>/status/", study_views.study_status, name="study_status"),
    path("studies/<slug:slug>/duplicate/", study_views.study_duplicate, name="study_duplicate"),
    path("studies/<slug:slug>/preview/", study_views.annotate_preview, name="annotate_preview"),
    path("studies/<slug:slug>/formats/", study_views.formats_help, name="formats_help"),
    re_path(
        r"^studies/(?P<slug>[-\w]+)/formats/example-(?P<what>items|annotations)\.(?P<fmt>jsonl|csv)$",
        study_views.format_example,
        name="format_example",
    ),
    path("studies/<slug:slug>/items/", study_views.item_list, name="item_list"),
    path("studies/<slug:slug>/items/<path:external_id>/", study_views.item_detail, name="item_detail"),
    path("studies/<slug:slug>/import/", transfer_views.study_import, name="study_import"),
    path("studies/<slug:slug>/imports/<int:pk>/", transfer_views.import_job, name="import_job"),
    path("studies/<slug:slug>/members/", member_views.study_members, name="study_members"),
    path("studies/<slug:slug>/members/", member_views.study_members, name="study_add_members"),  # the add form's POST
    path("studies/<slug:slug>/members/<int:member_id>/role/", member_views.member_role, name="member_role"),
    path("studies/<slug:slug>/members/<int:member_id>/active/", member_views.member_active, name="member_active"),
    path("studies/<slug:slug>/members/<int:member_id>/remove/", member_views.member_remove, name="member_remove"),
    path("studies/<slug:slug>/members/<int:member_id>/password/", member_views.member_password, name="member_password"),
    path("studies/<slug:slug>/invites/", member_views.invite_create, name="invite_create"),
    path("studies/<slug:slug>/invites/<int:invite_id>/revoke/", member_views.invite_revoke, name="invite_revoke"),
    path("invite/<str:token>/", member_views.invite, name="invite"),
    path("studies/<slug:slug>/adjudicate/", adjudication_views.adjudication_queue_page, name="adjudication_queue"),
    path(
        "studies/<slug:slug>/adjudicate/settings/",
        adjudication_views.adjudication_settings,
        name="adjudication_settings",
    ),
    path("studies/<slug:slug>/adjudicate/import/", adjudication_views.adjudication_import, name="adjudication_import"),
    path(
        "studies/<slug:slug>/adjudicate/items/<path:external_id>/",
        adjudication_views.adjudicate_item,
        name="adjudicate_item",
    ),
    path(
        "studies/<slug:slug>/members/<int:member_id>/adjudicator/",
        adjudication_views.member_adjudicator,
        name="member_adjudicator",
    ),
    path("studies/<slug:slug>/questionnaires.csv", transfer_views.questionnaire_export, name="questionnaire_export"),
    path("studies/<slug:slug>/participants/", crowd_views.participants_page, name="study_participants"),
    path("studies/<slug:slug>/participants/rotate/", crowd_views.participants_rotate, name="participants_rotate"),
    path(
        "studies/<slug:slug>/participants/checks/<str:which>/",
        crowd_views.check_items_page,
        name="participant_checks",
    ),
    path(
        "studies/<slug:slug>/participants/<int:participant_id>/withdraw/",
        crowd_views.participant_withdraw,
        name="participant_withdraw",
    ),
    path("studies/<slug:slug>/participants/payments.csv", crowd_views.payments_csv, name="participant_payments_csv"),
    path("studies/<slug:slug>/participants/mapping.csv", crowd_views.mapping_csv, name="participant_mapping_csv"),
    *prolific_views.urlpatterns,  # the Prolific page: studies/<slug>/participants/prolific/...
    path("p/<str:token>/", participant_views.arrive, name="participant_arrive"),
    path("crowd/<slug:slug>/", participant_views.step, name="participant_step"),
    path(
        "crowd/<slug:slug>/<int:assignment_id>/ahead/",
        participant_ahead_views.participant_ahead,
        name="participant_ahead",
    ),
    path(
        "crowd/<slug:slug>/<int:assignment_id>/release/",
        participant_ahead_views.participant_release,
        name="participant_release",
    ),
    path("studies/<slug:slug>/progress/", progress_views.study_progress, name="study_progress"),
    path("studies/<slug:slug>/progress/live/", progress_views.study_progress_live, name="study_progress_live"),
    path("studies/<slug:slug>/annotate/", workbench_views.annotate, name="annotate"),
    path("studies/<slug:slug>/annotate/training/", training_views.annotate_training, name="annotate_training"),
    # One route per questionnaire (the same view): no free path parameter to guess.
    *(
        path(
            f"studies/<slug:slug>/annotate/questionnaire/{kind}/",
            questionnaire_views.questionnaire_page,
            {"kind": kind},
            name="questionnaire",
        )
        for kind in ("pre", "quiz", "post")
    ),
    path("studies/<slug:slug>/annotate/<int:assignment_id>/", workbench_views.annotate_submit, name="annotate_submit"),
    path(
        "studies/<slug:slug>/annotate/<int:assignment_id>/revise/",
        workbench_views.annotate_revise,
        name="annotate_revise",
    ),
    path("studies/<slug:slug>/annotate/<int:assignment_id>/skip/", workbench_views.annotate_skip, name="annotate_skip"),
    path("studies/<slug:slug>/annotate/<int:assignment_id>/flag/", workbench_views.annotate_flag, name="annotate_flag"),
    path(
        "studies/<slug:slug>/annotate/<int:assignment_id>/ahead/",
        workbench_views.annotate_ahead,
        name="annotate_ahead",
    ),
    path(
        "studies/<slug:slug>/annotate/<int:assignment_id>/release/",
        workbench_views.annotate_release,
        name="annotate_release",
    ),
    re_path(r"^studies/(?P<slug>[-\w]+)/export\.(?P<fmt>csv|jsonl)$", transfer_views.study_export, name="study_export"),
    path("studies/<slug:slug>/exports/", transfer_views.study_export_request, name="study_export_request"),
    path(
        "studies/<slug:slug>/export-labelstudio.json",
        transfer_views.study_export_labelstudio,
        name="study_export_labelstudio",
    ),
    path("studies/<slug:slug>/exports/<int:export_id>/", transfer_views.export_job, name="export_job"),
    path(
        "studies/<slug:slug>/exports/<int:export_id>/download",
        transfer_views.export_job_download,
        name="export_job_download",
    ),
]
